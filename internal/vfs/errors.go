package vfs

import (
	"errors"
	"os"
)

// ErrLocked reports that a lock is held by another holder.
var ErrLocked = errors.New("vfs: file is locked")

const readOnly = os.O_RDONLY

// ErrPowerLoss is the error of every operation on a MemFS whose power was
// cut; a fault hook returns it to cut the power (see FaultFunc).
var ErrPowerLoss = errors.New("vfs: power lost")
