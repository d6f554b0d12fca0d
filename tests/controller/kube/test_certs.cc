#include "tests/controller/kube/test_certs.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace hptrain::kube::testing {
namespace {

std::atomic<long> next_serial{1};

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "test certificate: %s failed\n", what);
    std::abort();  // test setup bug
  }
}

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  Check(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

std::string ToPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  return pem;
}

std::string ToPem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  return pem;
}

TestCert Make(const TestCert* ca, const std::string& common_name, const std::string& names) {
  TestCert out;
  out.key.reset(EVP_EC_gen("P-256"));
  Check(out.key != nullptr, "EVP_EC_gen");
  out.cert.reset(X509_new());
  X509* cert = out.cert.get();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), next_serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, out.key.get());
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509* issuer = ca != nullptr ? ca->cert.get() : cert;
  X509_set_issuer_name(cert, X509_get_subject_name(issuer));
  if (ca == nullptr) {
    AddExtension(cert, issuer, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(cert, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
    AddExtension(cert, issuer, NID_subject_key_identifier, "hash");
  } else {
    AddExtension(cert, issuer, NID_basic_constraints, "critical,CA:FALSE");
    AddExtension(cert, issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
    AddExtension(cert, issuer, NID_ext_key_usage, "serverAuth,clientAuth");
    AddExtension(cert, issuer, NID_subject_alt_name, names.c_str());
  }
  EVP_PKEY* signer = ca != nullptr ? ca->key.get() : out.key.get();
  Check(X509_sign(cert, signer, EVP_sha256()) > 0, "X509_sign");
  out.cert_pem = ToPem(cert);
  out.key_pem = ToPem(out.key.get());
  return out;
}

}  // namespace

TestCert MakeCa(const std::string& common_name) { return Make(nullptr, common_name, ""); }

TestCert MakeLeaf(const TestCert& ca, const std::string& common_name, const std::string& names) {
  return Make(&ca, common_name, names);
}

}  // namespace hptrain::kube::testing
