package queue

import (
	"testing"

	"github.com/google/uuid"
)

func TestAskRequestDefaults(t *testing.T) {
	t.Parallel()
	p, v := uuid.New(), uuid.New()
	r, err := Ask{Reason: "needs a human", SessionID: "channel_123@1"}.Request(p, v, SourceAIRequest)
	if err != nil {
		t.Fatal(err)
	}
	if r.ProjectID != p || r.VisitorID != v || r.Source != SourceAIRequest || r.Urgency != UrgencyNormal ||
		r.VisitorMessage != "needs a human" || r.ChannelID != "channel_123" || r.ChannelType == nil || *r.ChannelType != 1 {
		t.Errorf("defaults: got %+v", r)
	}
	r, err = Ask{Source: "visitor", Urgency: "high", Reason: "r", VisitorMessage: "m"}.Request(p, v, SourceSystem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != SourceVisitor || r.Urgency != "high" || r.VisitorMessage != "m" || r.ChannelType != nil {
		t.Errorf("given values: got %+v", r)
	}
	if _, err := (Ask{SessionID: "nope"}).Request(p, v, SourceSystem); err == nil {
		t.Error("a bad session id: want ParseSessionID's error")
	}
}
