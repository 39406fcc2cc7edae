package e2e

import (
	"errors"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func isInvalid(err error) bool  { return errors.Is(wire.FromStatus(err), interfaces.ErrInvalid) }
func isNotFound(err error) bool { return errors.Is(wire.FromStatus(err), interfaces.ErrNotFound) }
func isConflict(err error) bool { return errors.Is(wire.FromStatus(err), interfaces.ErrConflict) }
