// Package faults injects the chaos run's faults (Injector): SIGKILLs of
// the services, one fault of the backing services at a time (restarts,
// kills and crashes of RabbitMQ, Postgres and MinIO; cuts, stalls and
// slow links through their proxies; a partitioned RabbitMQ node), or with
// -ha the loss of one server of each cluster at a time; each recorded with
// when it began (FaultEvent) and counted.
package faults
