package pftapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/cursorflow/cursorflow/internal/pftapi"
)

// A test serves the API on a loopback port and points the flow's api_url at it.
func Example() {
	api := pftapi.New(pftapi.Config{
		RateLimit: 2,
		// A frozen clock keeps all three requests in one window however slow the machine.
		Now: func() time.Time { return time.Unix(0, 0) },
	})
	srv := httptest.NewServer(api)
	defer srv.Close()

	for range 3 {
		resp, err := http.Get(srv.URL + "/api/v1/patient/vital_signs?patientId=1001")
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	st := api.Stats()
	fmt.Println("answered:", st.Answered[pftapi.EndpointVitalSigns], "rate limited:", st.RateLimited)
	// Output:
	// 200 {"data":[{"id":"VITA-1001-p1-i0","patientId":"1001","dataType":"vital_signs","value":2}],"paging":{"hasMore":false,"page":1,"pageSize":1,"total":1}}
	// 200 {"data":[{"id":"VITA-1001-p1-i0","patientId":"1001","dataType":"vital_signs","value":2}],"paging":{"hasMore":false,"page":1,"pageSize":1,"total":1}}
	// 429 {"detail":"Too Many Requests"}
	// answered: 2 rate limited: 1
}

func ExamplePageCount() {
	for _, t := range pftapi.DataTypes() {
		fmt.Println(t, pftapi.PageCount("1001", t))
	}
	fmt.Println("MDS ids on assessments page 1:", pftapi.MDSCount("1001", 1))
	// Output:
	// assessments 3
	// conditions 3
	// medications 2
	// vital_signs 1
	// MDS ids on assessments page 1: 9
}
