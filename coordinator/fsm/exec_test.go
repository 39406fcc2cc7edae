package fsm

import "os/exec"

var execCommand = exec.Command
