//go:build deps

// Package deps pins modules the project depends on but whose importing packages are
// still being written, so "go mod tidy" keeps them. Remove an import here once real
// code imports the module.
package deps

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/hashicorp/go-metrics"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/uber-go/tally/v4"
	_ "github.com/uber-go/tally/v4/prometheus"
	_ "go.etcd.io/bbolt"
	_ "gonum.org/v1/gonum/optimize"
	_ "gonum.org/v1/gonum/optimize/convex/lp"
	_ "gonum.org/v1/gonum/stat"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "gopkg.in/yaml.v3"
	_ "pgregory.net/rapid"
)
