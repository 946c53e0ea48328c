// Command console is dubflow's console: one stateless HTTP service (any
// number of replicas) serving a JSON API under /api/ to submit, watch and
// steer dubbing tasks, read the system's health, replay dead letters,
// re-drive compensation and view the waiting queue, and the web page at /.
package main

import "github.com/dubflow/dubflow/pkg/service"

func main() { service.Main("console", run) }
