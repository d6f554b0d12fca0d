#include "controller/kube/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace hptrain::kube {
namespace {

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

BioPtr MemoryBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Drains OpenSSL's thread-local error queue into one string.
std::string OpenSslErrors(absl::string_view fallback) {
  std::string out;
  while (unsigned long err = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof(buf));
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? std::string(fallback) : out;
}

}  // namespace

absl::StatusOr<X509Ptr> ParseCertificatePem(absl::string_view pem) {
  ERR_clear_error();
  BioPtr bio = MemoryBio(pem);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) {
    return absl::InvalidArgumentError(OpenSslErrors("no PEM certificate found"));
  }
  return cert;
}

absl::StatusOr<EvpPkeyPtr> ParsePrivateKeyPem(absl::string_view pem) {
  ERR_clear_error();
  BioPtr bio = MemoryBio(pem);
  EvpPkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    return absl::InvalidArgumentError(OpenSslErrors("no PEM private key found"));
  }
  return key;
}

absl::StatusOr<X509StorePtr> ParseCaBundlePem(absl::string_view pem) {
  ERR_clear_error();
  X509StorePtr store(X509_STORE_new());
  BioPtr bio = MemoryBio(pem);
  if (!store || !bio) return absl::ResourceExhaustedError("out of memory");
  int count = 0;
  while (X509* raw = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509Ptr cert(raw);
    if (X509_STORE_add_cert(store.get(), cert.get()) != 1) {
      return absl::InvalidArgumentError(OpenSslErrors("cannot add CA certificate"));
    }
    ++count;
  }
  ERR_clear_error();  // the loop ends on a "no start line" error
  if (count == 0) return absl::InvalidArgumentError("no PEM certificate found");
  return store;
}

bool KeyMatchesCertificate(X509* cert, EVP_PKEY* key) {
  bool match = X509_check_private_key(cert, key) == 1;
  ERR_clear_error();
  return match;
}

}  // namespace hptrain::kube
