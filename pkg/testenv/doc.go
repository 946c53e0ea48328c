// Package testenv gives tests isolated pieces of the real services the local
// stack provides: a fresh, migrated Postgres database, a fresh RabbitMQ
// virtual host, a fresh S3 bucket. Each is removed by t.Cleanup. The
// services are found through the same variables the workers read
// (DATABASE_URL, AMQP_URL, S3_*), with the local defaults. Private servers a
// test stops or kills (PrivateRabbit) and free ports (FreeAddr) are
// pkg/localstack's, which programs such as the chaos run use directly;
// testenv wraps them to fail the test and clean up by t.Cleanup.
package testenv
