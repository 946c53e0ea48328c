package media

import "syscall"

// setNice sets the niceness of process pid (its main thread, whose later
// threads inherit it).
func setNice(pid, nice int) error { return syscall.Setpriority(syscall.PRIO_PROCESS, pid, nice) }
