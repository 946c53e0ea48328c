// Package api is dubctl's console mode: with CONSOLE_URL and
// DUBFLOW_API_TOKEN and no DATABASE_URL, every command calls the console's
// API (services/console/API.md) with the bearer token and needs no
// database, broker or storage credentials; the API answers the read
// model's JSON, which dubctl prints as database mode prints its own. Its
// errors carry the console's message as it is, a usage error for 400 and
// 413 (Client.Get, Client.Post).
package api
