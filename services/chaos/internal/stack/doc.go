// Package stack is the chaos run's private stack: a RabbitMQ node (or a
// cluster), a Postgres server and a MinIO server on free ports and fresh
// folders, each stopped, killed, crashed and started again on demand; the
// -ha form (HAStack: RabbitMQ nodes in network namespaces, Postgres under
// Patroni, a distributed MinIO); the toxiproxy proxies in front of them
// (Proxies: cut, stall, slow, restore); and the cleanups that remove it
// all at the end.
package stack
