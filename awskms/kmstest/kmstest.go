// Package kmstest runs a KMS API server for tests: local-kms's request
// handler (github.com/nsmithuk/local-kms, a stand-in for AWS KMS that
// speaks its JSON protocol and keeps real keys in a LevelDB directory)
// served on a free port of 127.0.0.1 from this process, so it is reached
// on loopback only (the local-kms command listens on every interface).
//
// local-kms keeps its region, account and database path in package
// variables: one Server at a time per process.
package kmstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	localkms "github.com/nsmithuk/local-kms/src"
	"github.com/nsmithuk/local-kms/src/config"
	"github.com/nsmithuk/local-kms/src/data"
)

// Region and Account are the server's, as its key ARNs name them.
const (
	Region  = "eu-west-2"
	Account = "111122223333"
)

// Server is a running KMS API server.
type Server struct {
	URL string // http://127.0.0.1:<port>

	srv  *http.Server
	db   *data.Database
	dir  string
	done chan struct{}
}

var running sync.Mutex

// Start starts a server with an empty key database in a new temporary
// directory. Close stops it and removes the directory.
func Start() (*Server, error) {
	if !running.TryLock() {
		return nil, errors.New("kmstest: a server is running in this process already")
	}
	dir, err := os.MkdirTemp("", "kmstest")
	if err != nil {
		running.Unlock()
		return nil, err
	}
	config.AWSRegion, config.AWSAccountId, config.DatabasePath = Region, Account, dir
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		running.Unlock()
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), dir: dir, done: make(chan struct{}), db: data.NewDatabase(dir)}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		localkms.HandleRequest(w, r, s.db)
	})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops the server and removes its keys.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.done
	s.db.Close()
	_ = os.RemoveAll(s.dir)
	running.Unlock()
}

// Client returns a KMS client of the server, with static credentials.
func (s *Server) Client() *kms.Client {
	return kms.New(kms.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "kmstest"}, nil
		}),
	})
}

// CreateKey creates a symmetric encryption key and returns its ARN.
func (s *Server) CreateKey(tb testing.TB) string {
	tb.Helper()
	out, err := s.Client().CreateKey(context.Background(), &kms.CreateKeyInput{})
	if err != nil {
		tb.Fatalf("kmstest: CreateKey: %v", err)
	}
	return *out.KeyMetadata.Arn
}

// Main starts a server for a package's tests, runs them and stops it:
// call it from TestMain, keeping the server in *shared.
func Main(m *testing.M, shared **Server) int {
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*shared = s
	defer s.Close()
	return m.Run()
}
