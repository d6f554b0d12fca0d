// TLS for the job's gRPC: the coordinator's and the parameter servers' servers, and the clients
// that call them (workers, ps shards, `hptrain run`). docs/security.md has the threat model.
//
// Files, in cert-manager's Secret layout, all in one directory:
//   ca.crt   the CA that signed tls.crt; clients trust only it, and with mutual TLS the servers
//            accept only client certificates it signed
//   tls.crt  this process's certificate (PEM; servers always, clients with mutual TLS). Its
//            subjectAltName must name the address clients dial (host name or IP).
//   tls.key  its private key (PEM)
// On Kubernetes they come from the Secret of spec.security.tls.secretName; under `hptrain run`
// GenerateRunCertificates() writes a fresh CA and one certificate for the run.
//
// The process-wide default: a process calls UseTls() once at start-up (before any server or
// client exists) with what its flags and the job say; StartGrpcServer(), CoordinatorClient and
// PsClient then use DefaultServerCredentials() / DefaultChannelCredentials(). Without UseTls()
// both are plaintext. The job token is checked over TLS as over plaintext.
#ifndef HPTRAIN_RUNTIME_PS_TLS_CREDENTIALS_H_
#define HPTRAIN_RUNTIME_PS_TLS_CREDENTIALS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace hptrain::ps {

// The PEM contents of a TLS directory.
struct TlsMaterial {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  bool mutual = false;  // servers require, and clients present, a certificate signed by the CA
};

// Reads ca.crt, tls.crt and tls.key from `dir`. Errors name the file: NotFound when missing,
// InvalidArgument when it is not PEM of the expected kind.
absl::StatusOr<TlsMaterial> LoadTlsDirectory(const std::string& dir, bool mutual);

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsMaterial& tls);
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsMaterial& tls);

// Sets the process-wide credentials from `dir` (LoadTlsDirectory). Not thread-safe: call it
// from main before any server or channel exists.
absl::Status UseTls(const std::string& dir, bool mutual);
// What `hptrain ps` and `hptrain worker` do with spec.security.tls: nothing unless `enabled`;
// else UseTls(dir, mutual), and InvalidArgument naming --tls-dir when `dir` is empty.
absl::Status UseJobTls(bool enabled, bool mutual, const std::string& dir);
// TLS credentials after UseTls(), plaintext otherwise.
std::shared_ptr<grpc::ServerCredentials> DefaultServerCredentials();
std::shared_ptr<grpc::ChannelCredentials> DefaultChannelCredentials();

// Writes a new self-signed CA and a certificate it signs into `dir` (ca.crt, tls.crt, tls.key,
// each mode 0600; the CA's key is not kept): P-256 keys, valid from an hour ago for 30 days, the
// certificate usable by servers and clients alike, its subjectAltName listing `hosts` (IP
// addresses or DNS names, e.g. "127.0.0.1", "localhost"). Errors: InvalidArgument for no hosts,
// Internal when OpenSSL fails, the errno of a failed write naming the file.
absl::Status GenerateRunCertificates(const std::string& dir, const std::vector<std::string>& hosts);

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_TLS_CREDENTIALS_H_
