// OpenSSL's libcrypto, for SHA-256 only (EVP digests). Only AccmonCrypto imports this module.
#include <openssl/evp.h>
#include <openssl/err.h>
