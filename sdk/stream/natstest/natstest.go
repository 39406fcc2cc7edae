package natstest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// Server is a running nats-server.
type Server struct {
	URL string
	Dir string
	cmd *exec.Cmd
	log string
}

// ErrMissing is returned by Start when nats-server is not installed.
var ErrMissing = errors.New("nats-server not found in PATH: run 'sudo make deps' (Debian package nats-server, listed in .ci/packages)")

// Start runs nats-server with JetStream on a free loopback port, its store
// under dir, its log in dir/nats.log. maxPayload (bytes, 0: the server's
// default of 1 MiB) bounds a message.
func Start(dir string, maxPayload int) (*Server, error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		return nil, ErrMissing
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n}\n", port, filepath.Join(dir, "js"))
	if maxPayload > 0 {
		conf += "max_payload: " + strconv.Itoa(maxPayload) + "\n"
	}
	cf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Dir: dir, log: filepath.Join(dir, "nats.log")}
	f, err := os.OpenFile(s.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "-c", cf)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); f.Close() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		nc, err := nats.Connect(s.URL, nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			b, _ := os.ReadFile(s.log)
			return nil, fmt.Errorf("nats-server did not start: %v\n%s", err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the server (SIGTERM, then SIGKILL after 5s).
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 250; i++ {
		if s.cmd.Process.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = s.cmd.Process.Kill()
}
