package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/strata-sched/strata/interfaces"
)

// ErrFenced is returned by epochSink.Write for a write under an older epoch
// than the sink has accepted for the shard: a newer owner exists.
var ErrFenced = errors.New("fenced: the sink has seen a newer epoch of this shard")

// epochSink is a file-based output that checks the fencing token. Per shard
// it keeps <dir>/<shard>.epoch, the largest epoch it has accepted, and
// appends records to <dir>/<shard>.out. A write under a smaller epoch is
// refused (ErrFenced) — as a Kafka broker refuses a producer's older epoch —
// so an owner that outlived its lease cannot write over its successor's
// output. Writers in several processes are serialised by an flock on the
// epoch file: the check and the append are one step.
type epochSink struct{ dir string }

func (s epochSink) path(shard interfaces.ShardID, ext string) string {
	return filepath.Join(s.dir, url.PathEscape(string(shard))+ext)
}

// Write appends record for shard under epoch, unless the sink has accepted a
// newer epoch of shard.
func (s epochSink) Write(shard interfaces.ShardID, epoch interfaces.Epoch, record string) error {
	f, err := os.OpenFile(s.path(shard, ".epoch"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closed right after
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	var seen uint64
	if v := strings.TrimSpace(string(b[:n])); v != "" {
		if seen, err = strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("sink %s: epoch file: %w", s.path(shard, ".epoch"), err)
		}
	}
	if uint64(epoch) < seen {
		return fmt.Errorf("write %s@%d: %w (%d)", shard, epoch, ErrFenced, seen)
	}
	if uint64(epoch) > seen {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.WriteAt([]byte(strconv.FormatUint(uint64(epoch), 10)+"\n"), 0); err != nil {
			return err
		}
	}
	out, err := os.OpenFile(s.path(shard, ".out"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%d %s\n", epoch, record)
	return errors.Join(err, out.Close())
}
