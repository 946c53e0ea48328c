// Package tenant keeps the projects (the tenants a dubbing service runs
// for) and their API tokens (issue 51): one writer for the projects,
// api_tokens, project_usage and project_charges tables, used by every door
// — the console's API and dubctl in database mode — so that a project or a
// token is checked, stored and shown the same way whichever door made it.
//
// A token's secret is shown once, when it is created; only its SHA-256 is
// stored, and Lookup finds a live token (not revoked, not expired) by it
// at every request, so that a revocation holds on every replica from the
// next request on. ChargeShared counts the minutes of video a project's
// tasks take through the shared engines per UTC day and answers a
// fault.Wait with reason project_quota past the project's daily limit.
package tenant
