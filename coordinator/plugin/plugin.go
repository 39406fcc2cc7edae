package plugin

import (
	"context"
	"fmt"
	"log"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/tiers"
)

// Name is the registered name of the plugin policy.
const Name = "plugin"

func init() { tiers.MustRegister(Name, New) }

// Policy calls an external TierPolicy plugin and falls back to a built-in policy.
type Policy struct {
	address  string
	timeout  time.Duration
	retry    time.Duration
	config   interfaces.PolicyConfig
	fallback interfaces.Policy
	now      func() time.Time

	mu        sync.Mutex
	logger    *log.Logger // nil: no log
	conn      *grpc.ClientConn
	remote    *wire.RemotePolicy
	healthy   bool
	lastErr   error
	nextTry   time.Time
	failures  int
	successes int
}

var (
	_ interfaces.Policy         = (*Policy)(nil)
	_ interfaces.HealthReporter = (*Policy)(nil)
	_ interfaces.CallTimeouter  = (*Policy)(nil)
)

// New builds the policy from its configuration (see the package doc).
func New(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
	p := &Policy{timeout: time.Second, retry: 5 * time.Second, config: interfaces.PolicyConfig{}, now: time.Now}
	fallback := tiers.DefaultPolicy
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := cfg[k]
		switch k {
		case "address":
			p.address = v
		case "fallback":
			fallback = v
		case "timeout", "retry":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("policy plugin: key %q: must be a positive duration such as 500ms (got %q): %w", k, v, interfaces.ErrInvalid)
			}
			if k == "timeout" {
				p.timeout = d
			} else {
				p.retry = d
			}
		default:
			p.config[k] = v
		}
	}
	if p.address == "" {
		return nil, fmt.Errorf("policy plugin: key \"address\" is required (the plugin's gRPC address): %w", interfaces.ErrInvalid)
	}
	if fallback == Name {
		return nil, fmt.Errorf("policy plugin: key \"fallback\": must be a built-in policy, not %q: %w", Name, interfaces.ErrInvalid)
	}
	fb, err := tiers.New(fallback, nil)
	if err != nil {
		return nil, fmt.Errorf("policy plugin: key \"fallback\": %w", err)
	}
	p.fallback = fb
	conn, err := grpc.NewClient(p.address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("policy plugin: key \"address\": %w", err)
	}
	p.conn = conn
	return p, nil
}

// Redial replaces the connection to the plugin with one made with opts (a
// tier daemon with TLS: credentials that require a plugin certificate).
func (p *Policy) Redial(opts ...grpc.DialOption) error {
	conn, err := grpc.NewClient(p.address, opts...)
	if err != nil {
		return fmt.Errorf("policy plugin: key \"address\": %w", err)
	}
	p.mu.Lock()
	old := p.conn
	p.conn, p.remote = conn, nil
	p.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// SetLogger makes the policy log its transitions through l — the plugin
// failing (the fallback plans from then on) and the plugin healthy again —
// never each call. A tier daemon passes its own logger.
func (p *Policy) SetLogger(l *log.Logger) {
	p.mu.Lock()
	p.logger = l
	p.mu.Unlock()
}

// Name describes the policy: the plugin's address and the fallback.
func (p *Policy) Name() string {
	return fmt.Sprintf("plugin(%s, fallback %s)", p.address, p.fallback.Name())
}

// Status tells whether the plugin is healthy, the last error, and the counts of
// plans it produced and calls that failed.
type Status struct {
	Address   string
	Healthy   bool
	LastError string
	Successes int
	Failures  int
}

// Status reports the plugin's health.
func (p *Policy) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Status{Address: p.address, Healthy: p.healthy, Successes: p.successes, Failures: p.failures}
	if p.lastErr != nil {
		s.LastError = p.lastErr.Error()
	}
	return s
}

// Plan asks the plugin, within the time-out; on any failure, or while the plugin
// is in its back-off after one, it plans with the fallback. When ctx has a
// deadline (a tier's round has its solve_timeout), the plugin gets at most half
// of the time left, so that a hung plugin leaves the fallback the other half.
func (p *Policy) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	p.mu.Lock()
	wait := p.failures > 0 && !p.healthy && p.now().Before(p.nextTry)
	remote := p.remote
	p.mu.Unlock()
	if !wait {
		plan, err := p.callPlugin(ctx, remote, v)
		if err == nil {
			return plan, nil
		}
		p.fail(err)
	}
	return p.fallback.Plan(ctx, v)
}

// CallTimeout is the configured deadline of one plugin call
// (interfaces.CallTimeouter).
func (p *Policy) CallTimeout() time.Duration { return p.timeout }

// Health is Status as an interfaces.HealthReporter says it.
func (p *Policy) Health() interfaces.PolicyHealth {
	st := p.Status()
	return interfaces.PolicyHealth{Healthy: st.Healthy, Failures: st.Failures, Describe: st.Describe()}
}

// callTimeout is the plugin call's deadline under ctx: the configured time-out,
// and at most half of what is left of ctx's deadline (the rest is the
// fallback's).
func (p *Policy) callTimeout(ctx context.Context) time.Duration {
	t := p.timeout
	if dl, ok := ctx.Deadline(); ok {
		if half := dl.Sub(p.now()) / 2; half < t {
			t = half
		}
	}
	return t
}

func (p *Policy) callPlugin(ctx context.Context, remote *wire.RemotePolicy, v *interfaces.View) (interfaces.Plan, error) {
	cctx, cancel := context.WithTimeout(ctx, p.callTimeout(ctx))
	defer cancel()
	if remote == nil {
		r, err := wire.DialPolicy(cctx, p.conn, p.config)
		if err != nil {
			return interfaces.Plan{}, err
		}
		p.mu.Lock()
		p.remote = r
		p.mu.Unlock()
		remote = r
	}
	plan, err := remote.Plan(cctx, v)
	if err != nil {
		return interfaces.Plan{}, err
	}
	p.mu.Lock()
	recovered := !p.healthy
	p.healthy = true
	p.successes++
	logger, failures := p.logger, p.failures
	p.mu.Unlock()
	if recovered && logger != nil {
		if failures == 0 {
			logger.Printf("policy plugin %s: healthy", p.address)
		} else {
			logger.Printf("policy plugin %s: healthy again (%d failed calls so far); planning with the plugin", p.address, failures)
		}
	}
	return plan, nil
}

func (p *Policy) fail(err error) {
	p.mu.Lock()
	// A transition: the first failure, or one after a success. While the
	// plugin stays unhealthy its failed retries are only counted.
	transition := p.healthy || p.failures == 0
	p.healthy = false
	p.failures++
	p.lastErr = err
	p.remote = nil // negotiate again: the plugin may have been replaced
	p.nextTry = p.now().Add(p.retry)
	logger := p.logger
	p.mu.Unlock()
	if transition && logger != nil {
		logger.Printf("policy plugin %s failed: %v; planning with the fallback %s, the plugin is tried again every %v",
			p.address, err, p.fallback.Name(), p.retry)
	}
}

// Close releases the connection to the plugin.
func (p *Policy) Close() error { return p.conn.Close() }

// Describe is a one-line status for people: "healthy" or "unhealthy: why".
func (s Status) Describe() string {
	if s.Healthy {
		return "healthy"
	}
	if s.LastError == "" {
		return "not called yet"
	}
	return "unhealthy: " + strings.TrimSpace(s.LastError)
}
