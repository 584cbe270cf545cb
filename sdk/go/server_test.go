package podfit_test

// A real podfit-server for the tests: found on the PATH (as after the README's install command),
// started on a free loopback port, waited for until its gRPC health check says SERVING, and stopped by
// its PID. Never skipped: a missing server fails the test with the command that fixes it.

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"

	podfit "github.com/podfit/podfit/sdk/go"
)

const startupTimeout = 30 * time.Second

// testServer is one running podfit-server.
type testServer struct {
	target string
	pid    int
}

// lockedBuffer collects the server's output for failure messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer starts podfit-server with more flags (--auth-token-file, --tls-cert-file, ...) and
// returns once it is SERVING, checked over a connection made with dialOpts (WithInsecure when none).
// The server is stopped when the test ends.
func startServer(t *testing.T, args []string, dialOpts ...podfit.Option) *testServer {
	t.Helper()
	executable, err := exec.LookPath("podfit-server")
	if err != nil {
		t.Fatalf("podfit-server is not on the PATH: the Go SDK tests need a real server. Run the README's "+
			"install command, then e.g. `PATH=$PWD/.venv/bin:$PATH sdk/go/test.sh` (%v)", err)
	}
	target := "127.0.0.1:" + freePort(t)
	output := &lockedBuffer{}
	cmd := exec.Command(executable,
		append([]string{"--grpc-addr", target, "--extender-addr", "off", "--metrics-addr", "off", "--log-level", "WARNING"}, args...)...)
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", executable, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		select {
		case <-exited:
			return
		default:
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-exited
		}
	})

	// Wait for the port to accept connections first, so that gRPC's first connection attempt succeeds
	// (a failed one backs off for a second), then for the health check to say SERVING.
	deadline := time.Now().Add(startupTimeout)
	for {
		select {
		case <-exited:
			t.Fatalf("podfit-server exited (%v) before serving:\n%s", cmd.ProcessState, output)
		default:
		}
		if conn, err := net.DialTimeout("tcp", target, time.Second); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("podfit-server did not listen on %s within %s:\n%s", target, startupTimeout, output)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(dialOpts) == 0 {
		dialOpts = []podfit.Option{podfit.WithInsecure()}
	}
	health := grpc_health_v1.NewHealthClient(dial(t, target, dialOpts...).Conn())
	// A server waiting for a feeder's sync is up but reports NOT_SERVING until then.
	ready := grpc_health_v1.HealthCheckResponse_SERVING
	if slices.Contains(args, "--wait-for-sync") {
		ready = grpc_health_v1.HealthCheckResponse_NOT_SERVING
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		response, err := health.Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && response.GetStatus() == ready {
			return &testServer{target: target, pid: pid}
		}
		select {
		case <-exited:
			t.Fatalf("podfit-server exited (%v) before serving:\n%s", cmd.ProcessState, output)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("podfit-server did not serve on %s within %s (last: %v, %v):\n%s",
				target, startupTimeout, response.GetStatus(), err, output)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer listener.Close()
	_, port, _ := net.SplitHostPort(listener.Addr().String())
	return port
}

// dial makes a client closed when the test ends.
func dial(t *testing.T, target string, opts ...podfit.Option) *podfit.Client {
	t.Helper()
	client, err := podfit.Dial(context.Background(), target, opts...)
	if err != nil {
		t.Fatalf("Dial(%s): %v", target, err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// newClusterClient starts a plaintext server and applies the example cluster to it.
func newClusterClient(t *testing.T) *podfit.Client {
	t.Helper()
	server := startServer(t, nil)
	client := dial(t, server.target, podfit.WithInsecure())
	if _, err := client.Apply(context.Background(), exampleCluster(t)); err != nil {
		t.Fatalf("applying the example cluster: %v", err)
	}
	return client
}

// examples is the repository's deploy/examples, which the Python CLI's documentation uses too.
var examples = filepath.Join("..", "..", "deploy", "examples")

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// readManifests returns the documents of a YAML file as Kubernetes JSON.
func readManifests(t *testing.T, name string) []json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, name))
	if err != nil {
		t.Fatalf("reading the example: %v", err)
	}
	var documents []json.RawMessage
	for _, document := range documentSeparator.Split(string(data), -1) {
		converted, err := yaml.YAMLToJSON([]byte(document))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if trimmed := strings.TrimSpace(string(converted)); trimmed != "null" && trimmed != "" {
			documents = append(documents, converted)
		}
	}
	return documents
}

func exampleCluster(t *testing.T) []json.RawMessage { return readManifests(t, "cluster.yaml") }

func examplePod(t *testing.T) json.RawMessage { return readManifests(t, "pod.yaml")[0] }
