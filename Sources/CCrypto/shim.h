// OpenSSL's libcrypto, for SHA-256 only. Only AccmonCrypto imports this module.
//
// SHA256_Init/Update/Final are deprecated since OpenSSL 3.0 in favour of EVP digests, but kept in every 3.x build that
// does not leave deprecated interfaces out: they are the implementation itself, with no context allocation, provider
// dispatch or engine lookup around it. That machinery, not the hashing, is what a digest of a USB device's few dozen
// descriptor bytes costs, and it runs cold in accmond, once per plug. Without them, EVP.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/sha.h>

/// The SHA-256 of `count` bytes at `bytes` into `digest` (32 bytes); 1 on success, 0 on failure (OpenSSL's error
/// queue says why).
static inline int accmon_sha256(const void *bytes, size_t count, unsigned char *digest) {
#ifndef OPENSSL_NO_DEPRECATED_3_0
    SHA256_CTX context;
    return SHA256_Init(&context) && SHA256_Update(&context, bytes, count) && SHA256_Final(digest, &context);
#else
    unsigned int length = 0;
    return EVP_Digest(bytes, count, digest, &length, EVP_sha256(), NULL) == 1 && length == SHA256_DIGEST_LENGTH;
#endif
}
