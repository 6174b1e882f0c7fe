package vfs

import (
	"errors"
	"os"
)

// ErrLocked reports that a lock is held by another holder.
var ErrLocked = errors.New("vfs: file is locked")

const readOnly = os.O_RDONLY
