// Command soak runs the deterministic simulation (coordinator/dst) for
// millions of steps — seed after seed of the default run — and reports the
// steps per second and every violation. On a terminal it draws a progress bar
// with an ETA; otherwise it prints a line now and then. It runs on one core
// (GOMAXPROCS 1 unless -cpus says otherwise).
//
//	make dst-soak                         # 10M steps
//	go run ./coordinator/dst/soak -steps 50000000 -seed 1000
//
// A violation is printed as the harness reports it (the shrunk fault plan and
// the last steps of the replay) and the command exits 1; replay one seed with
// DST_SEED=<seed> DST_SOAK=1 go test -run TestSeed -v ./coordinator/dst.
package main
