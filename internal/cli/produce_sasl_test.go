package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// selfSigned makes a certificate for 127.0.0.1 and writes its PEM (the CA
// a client trusts) to dir.
func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ubik test broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// TestProduceTLSAndSCRAM drives kafka.Config's TLS and SASL (SCRAM-SHA-256)
// through a real command against a broker that demands both; a wrong
// password fails, and the password never appears in the output.
func TestProduceTLSAndSCRAM(t *testing.T) {
	cert, ca := selfSigned(t, t.TempDir())
	const pass = "s3cret-pa55"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "ubik", pass),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	url := "kafka://" + addr + "/secure?tls=true&tls_ca=" + ca + "&sasl_mechanism=SCRAM-SHA-256&sasl_user=ubik"

	env, _, errb := runTestEnv("{\"id\":\"a\"}\n{\"id\":\"b\"}\n")
	env.Getenv = func(k string) string {
		if k == "UBIK_KAFKA_PASSWORD" {
			return pass
		}
		return ""
	}
	if code := Main(context.Background(), env, []string{"produce", "--to", url}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if strings.Contains(errb.String(), pass) {
		t.Fatal("the password appeared in the output")
	}

	// The records are there, read by a client with the same credentials.
	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(pemBytes)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(scram.Auth{User: "ubik", Pass: pass}.AsSha256Mechanism()),
		kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	for n < 2 && ctx.Err() == nil {
		n += len(cl.PollFetches(ctx).Records())
	}
	if n != 2 {
		t.Fatalf("read %d records back, want 2", n)
	}

	// A wrong password is refused, and not echoed.
	env, _, errb = runTestEnv("{\"id\":\"c\"}\n")
	env.Getenv = func(k string) string {
		if k == "UBIK_KAFKA_PASSWORD" {
			return "wrong-" + pass
		}
		return ""
	}
	if code := Main(context.Background(), env, []string{"produce", "--to", url}); code == 0 {
		t.Fatal("a wrong password was accepted")
	}
	if strings.Contains(errb.String(), pass) {
		t.Fatalf("the password appeared in the error: %s", errb)
	}
	if !strings.Contains(errb.String(), "check the address and the TLS and SASL settings") {
		t.Fatalf("the error does not say what to check: %s", errb)
	}
}
