package stream

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/interfaces"
)

// Header keys of the records and of the sink's and checkpoints' entries.
const (
	// HeaderEventTime is a record's event time, Unix nanoseconds (decimal).
	HeaderEventTime = "Strata-Event-Time"
	// HeaderEpoch is the fencing token of a sink entry: the writer's epoch.
	HeaderEpoch = "Strata-Epoch"
	// HeaderSeq is a sink entry's output sequence, strictly increasing per
	// shard's outputs (a fence marker repeats the last one).
	HeaderSeq = "Strata-Seq"
	// HeaderFence marks a sink entry that fences (no output): "1".
	HeaderFence = "Strata-Fence"
)

// Names maps a job's shards onto JetStream: the job's records live in the
// stream InputStream, partition i on subject <prefix>.<job>.<i>; shard
// "<job>/<i>" consumes partition i. Checkpoints are in the KV bucket
// CheckpointBucket (large states in the object store of the same name), the
// fenced sink in the stream SinkStream, shard i on <prefix>-out.<job>.<i>.
type Names struct {
	Job string
	// Prefix of the subjects; default "strata".
	Prefix string
}

// CheckJob validates a job name for use in subjects and stream names: 1-64
// letters, digits, - or _.
func CheckJob(field, job string) error {
	if job == "" {
		return &interfaces.FieldError{Field: field, Rule: "is required"}
	}
	if len(job) > 64 || strings.IndexFunc(job, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		return &interfaces.FieldError{Field: field, Rule: "must be 1-64 letters, digits, - or _ (it names NATS subjects and streams)", Value: job}
	}
	return nil
}

func (n Names) prefix() string {
	if n.Prefix == "" {
		return "strata"
	}
	return n.Prefix
}

// InputStream is the name of the job's input stream.
func (n Names) InputStream() string { return strings.ToUpper(n.prefix()) + "_" + n.Job }

// Subject is partition p's subject.
func (n Names) Subject(p int) string { return fmt.Sprintf("%s.%s.%d", n.prefix(), n.Job, p) }

// SinkStream is the name of the job's fenced output stream.
func (n Names) SinkStream() string { return strings.ToUpper(n.prefix()) + "_OUT_" + n.Job }

// SinkSubject is shard p's output subject.
func (n Names) SinkSubject(p int) string { return fmt.Sprintf("%s-out.%s.%d", n.prefix(), n.Job, p) }

// inputSubjects and sinkSubjects are the wildcards of all partitions.
func (n Names) inputSubjects() string { return fmt.Sprintf("%s.%s.>", n.prefix(), n.Job) }
func (n Names) sinkSubjects() string  { return fmt.Sprintf("%s-out.%s.>", n.prefix(), n.Job) }

// CheckpointBucket is the job's checkpoint bucket (KV and object store).
func (n Names) CheckpointBucket() string { return strings.ToUpper(n.prefix()) + "_CKPT_" + n.Job }

// Partition returns the partition shard consumes: shard "<job>/<i>" → i.
func (n Names) Partition(shard interfaces.ShardID) (int, error) {
	job, idx, ok := strings.Cut(string(shard), "/")
	if !ok || job != n.Job {
		return 0, &interfaces.FieldError{Field: "shard", Rule: fmt.Sprintf("must be %s/<index> (a shard of job %s)", n.Job, n.Job), Value: string(shard)}
	}
	p, err := strconv.Atoi(idx)
	if err != nil || p < 0 {
		return 0, &interfaces.FieldError{Field: "shard", Rule: "index must be an integer ≥ 0", Value: string(shard)}
	}
	return p, nil
}

// PartitionOfSubject returns the partition whose subject subj is.
func (n Names) PartitionOfSubject(subj string) (int, error) {
	i := strings.LastIndexByte(subj, '.')
	p, err := strconv.Atoi(subj[i+1:])
	if err != nil || p < 0 || n.Subject(p) != subj {
		return 0, fmt.Errorf("subject %s is no partition of job %s", subj, n.Job)
	}
	return p, nil
}

// PartitionFor returns the partition of key among n (FNV-1a): a producer's
// choice, so that one key's records stay in one partition, in order.
func PartitionFor(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// isConflict reports an optimistic-concurrency failure: a KV revision or a
// subject's last sequence moved under the writer.
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == 10164
	}
	return false
}
