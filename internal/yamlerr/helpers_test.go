package yamlerr

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

type yamlNode = yaml.Node

func lineErr(line int, msg string) error { return fmt.Errorf("line %d: %s", line, msg) }
