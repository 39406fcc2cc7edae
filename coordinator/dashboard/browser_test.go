package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/dashboard"
	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// TestDashboardInBrowser loads the dashboard of a running dev cluster in
// headless Chromium (Debian's chromium; `sudo make deps`): the tree lists
// every host, a drain started from the page shows up in the move feed, and a
// screenshot of the page is not blank. STRATA_SCREENSHOT=path keeps the
// screenshot there (make screenshot refreshes docs/dashboard.png).
func TestDashboardInBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found on PATH: this test drives the real browser; install it with `sudo make deps` (.ci/packages)")
	}
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), Regions: 2, HostsPerRegion: 3, Interval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, err := grpc.NewClient(c.Global.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	const n = 48
	if _, err := wire.NewAdminClient(cc).SubmitJob(context.Background(), &wire.SubmitJobRequest{Job: &wire.JobSpec{
		Id: "sample", Parallelism: n, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1, Mem: 2 << 30, Net: 1 << 20, Tasks: 1}, InputRate: 1000},
	}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "every shard running", 30*time.Second, func() error {
		k := 0
		for _, h := range c.Hosts {
			k += len(h.Agent().Running())
		}
		if k != n {
			return fmt.Errorf("%d of %d shards run", k, n)
		}
		return nil
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("hide-scrollbars", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 120*time.Second)
	defer cancelT()

	url := "http://" + c.Global.HTTPAddr() + dashboard.Path
	host := "region-1-host-1"
	sel := fmt.Sprintf(`.child[data-child=%q]`, host)
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}

	// The tree lists every host of the cluster.
	listed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.child')).map(e => e.dataset.child)`))
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{"region-1", "region-2"}, keys(c.Hosts)...)
	sort.Strings(listed)
	sort.Strings(want)
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Errorf("the tree lists %v, want %v", listed, want)
	}

	// Drain a host from the page: its moves appear in the feed.
	// Clicked from the page's own script: the tree is re-rendered every
	// 1.5 s, and a node found by one DevTools call may be gone by the next.
	clicked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const b = document.querySelector(%q); if (!b) return false; b.click(); return true; })()`, sel+" button.drain")))
	if err != nil || !clicked {
		t.Fatalf("click Drain of %s: %v (button found: %v)", host, err, clicked)
	}
	moved := fmt.Sprintf(`Array.from(document.querySelectorAll('#feed li[data-kind="move"]')).filter(e => e.textContent.includes(%q)).length`, host+" →")
	deadline := time.Now().Add(60 * time.Second)
	for {
		k, err := chromedp.Run(ctx, chromedp.Evaluate[int](moved))
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 {
			t.Logf("the feed shows %d moves off %s", k, host)
			break
		}
		if time.Now().After(deadline) {
			feed, _ := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#feed")))
			errBox, _ := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#error")))
			t.Fatalf("no move off %s in the feed after 60s; feed:\n%s\nerror box: %q", host, feed, errBox)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The tree re-renders every 1.5 s: wait for the state the drain set.
	var state string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		st, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), "data-state"))
		if err != nil {
			t.Fatal(err)
		}
		state = st.Value
		if state == "draining" || time.Now().After(end) {
			break
		}
	}
	if state != "draining" {
		t.Errorf("%s is shown %q after the drain, want draining", host, state)
	}
	// The move's reason is shown (from the placement history).
	reason, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`Array.from(document.querySelectorAll('#feed li[data-kind="move"]')).some(e => /\([a-z]+: .+\)/.test(e.textContent))`))
	if err != nil {
		t.Fatal(err)
	}
	if !reason {
		t.Error("no move of the feed carries its reason")
	}

	// A shard search and its explanation render.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#search"), "sample/1"),
		chromedp.Click(chromedp.CSS("#search-form button")),
		chromedp.WaitVisible(chromedp.CSS(`#shards a`)),
	); err != nil {
		t.Fatalf("shard search: %v", err)
	}
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const a = document.querySelector('#shards a'); if (!a) return false; a.click(); return true; })()`)); err != nil || !ok {
		t.Fatalf("click a search result: %v (found: %v)", err, ok)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#explain table`))); err != nil {
		t.Fatalf("explain: %v", err)
	}

	// Let the heat map gather a few columns, then take the screenshot.
	time.Sleep(4 * time.Second)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	checkNotBlank(t, shot)
	out := os.Getenv("STRATA_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(shot))
}

// checkNotBlank fails unless the PNG shows a page: many colours, and most of
// it not the background.
func checkNotBlank(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bg := img.At(img.Bounds().Min.X+img.Bounds().Dx()/2, img.Bounds().Max.Y-2)
	colours := map[[3]uint32]bool{}
	differ, total := 0, 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 3 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 3 {
			total++
			c := img.At(x, y)
			r, g, bl, _ := c.RGBA()
			colours[[3]uint32{r >> 11, g >> 11, bl >> 11}] = true
			if !same(c, bg) {
				differ++
			}
		}
	}
	if len(colours) < 20 || differ*20 < total {
		t.Errorf("the screenshot looks blank: %d colours, %d of %d sampled pixels differ from the background", len(colours), differ, total)
	}
	t.Logf("screenshot %v: %d colours, %.0f%% not background", img.Bounds().Size(), len(colours), 100*float64(differ)/float64(total))
}

func same(a, b interface{ RGBA() (r, g, b, a uint32) }) bool {
	r1, g1, b1, _ := a.RGBA()
	r2, g2, b2, _ := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2
}

var _ image.Image // png.Decode's result

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
