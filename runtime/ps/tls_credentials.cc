#include "runtime/ps/tls_credentials.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "openssl/bn.h"
#include "openssl/err.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/x509.h"
#include "openssl/x509v3.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"

namespace hptrain::ps {
namespace {

std::optional<TlsMaterial>& ProcessTls() {
  static std::optional<TlsMaterial> tls;
  return tls;
}

absl::Status OpenSslError(const std::string& what) {
  const unsigned long code = ERR_get_error();
  char text[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat("generating TLS certificates: ", what, ": ", text));
}

struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertDeleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Cert = std::unique_ptr<X509, CertDeleter>;

absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr) return OpenSslError(absl::StrCat("extension ", OBJ_nid2sn(nid)));
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return OpenSslError(absl::StrCat("adding extension ", OBJ_nid2sn(nid)));
  return absl::OkStatus();
}

// A certificate for `key` named `common_name`, signed by `issuer_key` (issuer null: self-signed,
// a CA; otherwise a leaf for `hosts`).
absl::StatusOr<Cert> MakeCertificate(EVP_PKEY* key, const std::string& common_name, X509* issuer,
                                     EVP_PKEY* issuer_key, const std::vector<std::string>& hosts) {
  Cert cert(X509_new());
  if (!cert) return OpenSslError("X509_new");
  X509_set_version(cert.get(), 2);  // v3
  BIGNUM* serial = BN_new();
  if (serial == nullptr || BN_rand(serial, 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get())) == nullptr) {
    BN_free(serial);
    return OpenSslError("serial number");
  }
  BN_free(serial);
  // An hour of slack for clocks behind this one.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 30L * 24 * 3600);
  if (X509_set_pubkey(cert.get(), key) != 1) return OpenSslError("X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("hptrain"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  HPTRAIN_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  if (issuer == nullptr) {
    HPTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    HPTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign"));
  } else {
    std::vector<std::string> names;
    for (const std::string& host : hosts) {
      unsigned char address[16];
      const bool ip = inet_pton(AF_INET, host.c_str(), address) == 1 ||
                      inet_pton(AF_INET6, host.c_str(), address) == 1;
      names.push_back(absl::StrCat(ip ? "IP:" : "DNS:", host));
    }
    HPTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always"));
    HPTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE"));
    HPTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature,keyEncipherment"));
    HPTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_ext_key_usage, "serverAuth,clientAuth"));
    HPTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_subject_alt_name, absl::StrJoin(names, ",")));
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return OpenSslError("X509_sign");
  return cert;
}

absl::StatusOr<std::string> CertificatePem(X509* cert) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return OpenSslError("PEM of certificate");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<std::string> PrivateKeyPem(EVP_PKEY* key) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("PEM of private key");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// Creates or replaces `path` with mode 0600 whatever the umask.
absl::Status WritePrivateFile(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return HPTRAIN_ERRNO(absl::StrCat("creating ", path));
  if (::fchmod(fd, 0600) != 0) {
    absl::Status status = HPTRAIN_ERRNO(absl::StrCat("chmod ", path));
    ::close(fd);
    return status;
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status status = HPTRAIN_ERRNO(absl::StrCat("writing ", path));
      ::close(fd);
      return status;
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return HPTRAIN_ERRNO(absl::StrCat("closing ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view marker,
                                    absl::string_view kind) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string pem, ReadFile(path));
  if (!absl::StrContains(pem, marker)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a PEM ", kind));
  }
  return pem;
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsDirectory(const std::string& dir, bool mutual) {
  TlsMaterial tls;
  tls.mutual = mutual;
  HPTRAIN_ASSIGN_OR_RETURN(
      tls.ca_pem, ReadPem(dir + "/ca.crt", "-----BEGIN CERTIFICATE-----", "certificate (ca.crt)"));
  HPTRAIN_ASSIGN_OR_RETURN(tls.cert_pem, ReadPem(dir + "/tls.crt", "-----BEGIN CERTIFICATE-----",
                                                 "certificate (tls.crt)"));
  HPTRAIN_ASSIGN_OR_RETURN(tls.key_pem,
                           ReadPem(dir + "/tls.key", "PRIVATE KEY-----", "private key (tls.key)"));
  return tls;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsMaterial& tls) {
  grpc::SslServerCredentialsOptions options(
      tls.mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (tls.mutual) options.pem_root_certs = tls.ca_pem;
  options.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsMaterial& tls) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls.ca_pem;  // only the job's CA, not the system's
  if (tls.mutual) {
    options.pem_private_key = tls.key_pem;
    options.pem_cert_chain = tls.cert_pem;
  }
  return grpc::SslCredentials(options);
}

absl::Status UseJobTls(bool enabled, bool mutual, const std::string& dir) {
  if (!enabled) return absl::OkStatus();
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "spec.security.tls.enabled needs --tls-dir (or $HPTRAIN_TLS_DIR): the directory "
        "holding ca.crt, tls.crt and tls.key");
  }
  return UseTls(dir, mutual);
}

absl::Status UseTls(const std::string& dir, bool mutual) {
  HPTRAIN_ASSIGN_OR_RETURN(TlsMaterial tls, LoadTlsDirectory(dir, mutual));
  ProcessTls() = std::move(tls);
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> DefaultServerCredentials() {
  const auto& tls = ProcessTls();
  return tls ? MakeServerCredentials(*tls) : grpc::InsecureServerCredentials();
}

std::shared_ptr<grpc::ChannelCredentials> DefaultChannelCredentials() {
  const auto& tls = ProcessTls();
  return tls ? MakeChannelCredentials(*tls) : grpc::InsecureChannelCredentials();
}

absl::Status GenerateRunCertificates(const std::string& dir,
                                     const std::vector<std::string>& hosts) {
  if (hosts.empty()) {
    return absl::InvalidArgumentError("generating TLS certificates: no host names");
  }
  Key ca_key(EVP_EC_gen("P-256"));
  if (!ca_key) return OpenSslError("CA key");
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("key");
  HPTRAIN_ASSIGN_OR_RETURN(
      Cert ca, MakeCertificate(ca_key.get(), "hptrain run CA", nullptr, ca_key.get(), {}));
  HPTRAIN_ASSIGN_OR_RETURN(
      Cert cert, MakeCertificate(key.get(), hosts.front(), ca.get(), ca_key.get(), hosts));
  HPTRAIN_ASSIGN_OR_RETURN(std::string ca_pem, CertificatePem(ca.get()));
  HPTRAIN_ASSIGN_OR_RETURN(std::string cert_pem, CertificatePem(cert.get()));
  HPTRAIN_ASSIGN_OR_RETURN(std::string key_pem, PrivateKeyPem(key.get()));
  HPTRAIN_RETURN_IF_ERROR(WritePrivateFile(dir + "/ca.crt", ca_pem));
  HPTRAIN_RETURN_IF_ERROR(WritePrivateFile(dir + "/tls.crt", cert_pem));
  return WritePrivateFile(dir + "/tls.key", key_pem);
}

}  // namespace hptrain::ps
