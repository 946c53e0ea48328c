package waiting

import "github.com/dubflow/dubflow/services/console/internal/route"

// Routes are the waiting-queue view's routes under /api/waiting/, each
// relayed to the dispatcher's route of the same shape under /queue/.
func (px Proxy) Routes() []route.Route {
	relay := func(path string) route.Route {
		return route.Route{Method: "GET", Path: "/api/waiting" + path, Access: route.Reader, Handle: px.Route("/queue" + path)}
	}
	return []route.Route{relay("/projects"), relay("/projects/{id}/status"), relay("/agents/{agentId}/status"), relay("/entries/{id}")}
}
