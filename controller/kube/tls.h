// PEM decoding for the client's TLS setup: cluster CA bundles, client certificates and keys held
// in memory (kubeconfig *-data fields, files read at config load).
//
// Every function returns an owning smart pointer; the caller frees nothing by hand. Errors are
// InvalidArgument with OpenSSL's reason ("no PEM certificate found", "bad decrypt", ...); the
// caller adds which field the PEM came from. Thread-safe (OpenSSL 3 is).
#ifndef HPTRAIN_CONTROLLER_KUBE_TLS_H_
#define HPTRAIN_CONTROLLER_KUBE_TLS_H_

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hptrain::kube {

struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct EvpPkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct X509StoreDeleter {
  void operator()(X509_STORE* store) const { X509_STORE_free(store); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyDeleter>;
using X509StorePtr = std::unique_ptr<X509_STORE, X509StoreDeleter>;

// The first certificate in `pem`.
absl::StatusOr<X509Ptr> ParseCertificatePem(absl::string_view pem);

// The first private key in `pem` (PKCS#8, PKCS#1 RSA or SEC1 EC; unencrypted).
absl::StatusOr<EvpPkeyPtr> ParsePrivateKeyPem(absl::string_view pem);

// A trust store holding every certificate in `pem` (a CA bundle); InvalidArgument if it holds
// none.
absl::StatusOr<X509StorePtr> ParseCaBundlePem(absl::string_view pem);

// Whether `key` is the private key of `cert`.
bool KeyMatchesCertificate(X509* cert, EVP_PKEY* key);

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_TLS_H_
