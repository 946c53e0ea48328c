package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// MinTokenLength is the shortest API token accepted.
const MinTokenLength = 16

// namedToken is one API token with the name the audit log shows for it.
type namedToken struct {
	name, role string
	digest     [sha256.Size]byte
}

// tokenName is what a token's name may hold: no "." (sessions carry the
// name in a dot-separated payload), no ":" or "," (the list's separators).
var tokenName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// parseTokens reads DUBFLOW_API_TOKENS: name:token[:readonly],… (spaces
// around the entries are ignored).
func parseTokens(list string) ([]namedToken, error) {
	var out []namedToken
	seen := map[string]bool{}
	for i, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		f := strings.Split(entry, ":")
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "readonly") {
			return nil, fmt.Errorf("DUBFLOW_API_TOKENS entry %d: want name:token or name:token:readonly", i+1)
		}
		if !tokenName.MatchString(f[0]) {
			return nil, fmt.Errorf("DUBFLOW_API_TOKENS entry %d: name %q: want 1..64 of A-Z a-z 0-9 _ -", i+1, f[0])
		}
		if len(f[1]) < MinTokenLength {
			return nil, fmt.Errorf("DUBFLOW_API_TOKENS %s: want a token of at least %d characters", f[0], MinTokenLength)
		}
		if seen[f[0]] || seen["\x00"+f[1]] {
			return nil, fmt.Errorf("DUBFLOW_API_TOKENS %s: a name or token given twice", f[0])
		}
		seen[f[0]], seen["\x00"+f[1]] = true, true
		role := RoleAdmin
		if len(f) == 3 {
			role = RoleRead
		}
		out = append(out, namedToken{name: f[0], role: role, digest: sha256.Sum256([]byte(f[1]))})
	}
	return out, nil
}

// configuredTokens is every token the configuration grants: the single
// tokens first (named "admin" and "read"), then DUBFLOW_API_TOKENS (list).
func configuredTokens(apiToken, readToken, list string) []namedToken {
	var out []namedToken
	if apiToken != "" {
		out = append(out, namedToken{name: RoleAdmin, role: RoleAdmin, digest: sha256.Sum256([]byte(apiToken))})
	}
	if readToken != "" {
		out = append(out, namedToken{name: RoleRead, role: RoleRead, digest: sha256.Sum256([]byte(readToken))})
	}
	named, _ := parseTokens(list) // ValidateTokens refused a bad list
	return append(out, named...)
}

// lookup returns the name and role token grants, or "", "". Every
// configured token is compared, in constant time.
func (a *Auth) lookup(token string) (name, role string) {
	if token == "" {
		return "", ""
	}
	h := sha256.Sum256([]byte(token))
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(h[:], t.digest[:]) == 1 {
			name, role = t.name, t.role
		}
	}
	return name, role
}

// ValidateTokens checks DUBFLOW_API_TOKEN (apiToken) and
// DUBFLOW_API_TOKENS (list) beside DUBFLOW_API_READ_TOKEN (readToken): at
// least one is set, each token is long enough, no token or name is given
// twice.
func ValidateTokens(apiToken, readToken, list string) error {
	named, err := parseTokens(list)
	switch {
	case err != nil:
		return err
	case apiToken == "" && len(named) == 0:
		return errors.New("DUBFLOW_API_TOKEN or DUBFLOW_API_TOKENS: want at least one token")
	case apiToken != "" && len(apiToken) < MinTokenLength:
		return fmt.Errorf("DUBFLOW_API_TOKEN: want at least %d characters", MinTokenLength)
	}
	single := map[string]string{RoleAdmin: apiToken, RoleRead: readToken}
	for _, t := range named {
		if single[t.name] != "" {
			return fmt.Errorf("DUBFLOW_API_TOKENS %s: the name of the single %s token", t.name, t.name)
		}
		for _, v := range single {
			if v != "" && sha256.Sum256([]byte(v)) == t.digest {
				return fmt.Errorf("DUBFLOW_API_TOKENS %s: the same token as DUBFLOW_API_TOKEN or _READ_TOKEN", t.name)
			}
		}
	}
	return nil
}
