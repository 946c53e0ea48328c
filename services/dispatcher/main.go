// Command dispatcher is dubflow's waiting-queue dispatcher: it queues
// visitors waiting for a human support agent and assigns them to agents with
// free capacity, through an HTTP API, the task.waiting_queue messages and a
// periodic scan, safely from any number of replicas.
package main

import "github.com/dubflow/dubflow/pkg/service"

func main() { service.Main("dispatcher", run) }
