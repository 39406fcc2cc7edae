//go:build deps

// Package deps has no code. Its deps.go imports, blank, the modules the project
// pinned in go.mod before code imported them, so that "go mod tidy" kept them.
// It is built only with the deps build tag (go build -tags deps ./internal/deps),
// so "go list ./..." and the normal build never see it; "go mod tidy" reads the
// files of every build tag, so it still does.
//
// Real code or tests now import every module listed there but one (of gonum the
// file names the stat package, which nothing imports, but the module is imported
// for optimize, lp and mat): github.com/hashicorp/go-metrics, which
// hashicorp/raft imports. All the file
// still does is keep go-metrics among go.mod's direct requirements: without it,
// "go mod tidy" moves go-metrics v0.5.4 to the indirect block and changes
// nothing else in go.mod or go.sum. The package may therefore be removed.
package deps
