package raftnode

import "github.com/hashicorp/raft"

func rAddr(s string) raft.ServerAddress { return raft.ServerAddress(s) }
