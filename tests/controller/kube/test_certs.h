// Throw-away X.509 material for TLS tests, generated in-process with OpenSSL (EC P-256).
#ifndef HPTRAIN_TESTS_CONTROLLER_KUBE_TEST_CERTS_H_
#define HPTRAIN_TESTS_CONTROLLER_KUBE_TEST_CERTS_H_

#include <string>

#include "controller/kube/tls.h"

namespace hptrain::kube::testing {

struct TestCert {
  X509Ptr cert;
  EvpPkeyPtr key;
  std::string cert_pem;
  std::string key_pem;
};

// A self-signed CA certificate named `common_name`.
TestCert MakeCa(const std::string& common_name);

// A certificate for `common_name` signed by `ca`, valid for the subjectAltName entries `names`
// (OpenSSL syntax), usable for server and client authentication.
TestCert MakeLeaf(const TestCert& ca, const std::string& common_name,
                  const std::string& names = "IP:127.0.0.1,DNS:localhost");

}  // namespace hptrain::kube::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_KUBE_TEST_CERTS_H_
