package main

import (
	"flag"
	"log"
	"net"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/examples/packtier"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7610", "address to serve on")
	flag.Parse()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterTierPolicyServer(srv, wire.NewPolicyServer(packtier.Name, func(interfaces.PolicyConfig) (interfaces.Policy, error) {
		return packtier.Pack{}, nil
	}))
	log.Printf("serving policy %s on %s", packtier.Name, lis.Addr())
	log.Fatal(srv.Serve(lis))
}
