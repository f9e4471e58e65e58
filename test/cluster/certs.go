package cluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of files the control plane needs, written under dir.
type pki struct {
	CACert, ServingCert, ServingKey, AdminCert, AdminKey, SAKey, SAPub string
}

type keyPair struct {
	cert *x509.Certificate
	key  *rsa.PrivateKey
}

func writePKI(dir string) (pki, error) {
	p := pki{
		CACert:      filepath.Join(dir, "ca.crt"),
		ServingCert: filepath.Join(dir, "apiserver.crt"),
		ServingKey:  filepath.Join(dir, "apiserver.key"),
		AdminCert:   filepath.Join(dir, "admin.crt"),
		AdminKey:    filepath.Join(dir, "admin.key"),
		SAKey:       filepath.Join(dir, "sa.key"),
		SAPub:       filepath.Join(dir, "sa.pub"),
	}
	ca, err := newCert(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "draforge-local-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return p, err
	}
	serving, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return p, err
	}
	admin, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "draforge-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return p, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return p, err
	}
	files := map[string][]byte{
		p.CACert:      certPEM(ca.cert),
		p.ServingCert: certPEM(serving.cert),
		p.ServingKey:  keyPEM(serving.key),
		p.AdminCert:   certPEM(admin.cert),
		p.AdminKey:    keyPEM(admin.key),
		p.SAKey:       keyPEM(sa),
		p.SAPub:       pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return p, err
		}
	}
	return p, nil
}

// newCert signs tmpl with parent, or self-signs when parent is nil.
func newCert(parent *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	signerCert, signerKey := tmpl, key
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}
