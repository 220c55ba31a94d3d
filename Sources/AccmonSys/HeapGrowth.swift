import CAccmonShims

/// Makes every malloc heap grow by `bytes` more than it needs (glibc's `M_TOP_PAD`), for a process that allocates
/// tens of megabytes on threads of its own: a thread's heap otherwise grows a few pages at a time, one mprotect call
/// each (glibc makes a thread's heap of up to 64 MB writable at once when the padding covers it). The padding is
/// address space, which holds no memory until it is used; but freed memory is kept up to that much too, so it is for a
/// process that does not run for long. Call it before the threads are made: a heap takes the padding when it is made,
/// and one made before grows page by page.
public func growHeaps(by bytes: Int) {
    _ = CAccmonShims_setHeapTopPad(Int32(clamping: bytes))
}
