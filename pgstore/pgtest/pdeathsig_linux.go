package pgtest

import "syscall"

// setParentDeathSignal has the kernel send the process SIGQUIT (the
// server's immediate shutdown) when the test process that started it
// dies.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGQUIT }
