package store

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUID makes m encode a uuid.UUID sent as a Postgres uuid from its
// 16 bytes. Without it pgx takes the uuid.UUID for a driver.Valuer: it
// formats it as text and parses the text back, for every argument of every
// statement — 7 % of the Go CPU of a relay hop (pprof). A uuid.UUID sent where
// Postgres expects another type falls through to the driver.Valuer as
// before (the wrap plans nothing for it), and scanning is left alone.
func registerUUID(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{wrapUUIDEncodePlan}, m.TryWrapEncodePlanFuncs...)
}

// wrapUUIDEncodePlan hands a uuid.UUID on as its [16]byte, which the uuid
// codec encodes directly.
func wrapUUIDEncodePlan(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidEncodePlan{}, [16]byte(u), true
	}
	return nil, nil, false
}

type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode([16]byte(value.(uuid.UUID)), buf)
}
