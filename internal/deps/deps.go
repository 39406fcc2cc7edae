//go:build deps

package deps

// Every module pinned here is now imported by real code or tests, except
// github.com/hashicorp/go-metrics (which hashicorp/raft imports); see doc.go.
import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/hashicorp/go-metrics"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "go.etcd.io/bbolt"
	_ "gonum.org/v1/gonum/optimize"
	_ "gonum.org/v1/gonum/optimize/convex/lp"
	_ "gonum.org/v1/gonum/stat"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "gopkg.in/yaml.v3"
	_ "pgregory.net/rapid"
)
