package pftapi

import (
	"crypto/md5"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// The paginated data types, in the order the flow fetches them.
const (
	TypeAssessments = "assessments"
	TypeConditions  = "conditions"
	TypeMedications = "medications"
	TypeVitalSigns  = "vital_signs"
)

// DataTypes lists the paginated data types.
func DataTypes() []string {
	return []string{TypeAssessments, TypeConditions, TypeMedications, TypeVitalSigns}
}

// pageRange returns the inclusive range of page counts of a data type.
func pageRange(dataType string) (lo, hi int64, ok bool) {
	switch dataType {
	case TypeAssessments:
		return 2, 4, true
	case TypeConditions:
		return 1, 3, true
	case TypeMedications:
		return 2, 3, true
	case TypeVitalSigns:
		return 1, 1, true
	}
	return 0, 0, false
}

// Hash returns the MD5 digest of the UTF-8 string s read as one big-endian
// unsigned 128-bit integer: the source of every value the API answers.
func Hash(s string) *big.Int {
	sum := md5.Sum([]byte(s))
	return new(big.Int).SetBytes(sum[:])
}

// mod returns x mod m for a non-negative x and a positive m.
func mod(x *big.Int, m int64) int64 {
	return new(big.Int).Mod(x, big.NewInt(m)).Int64()
}

// PageCount returns how many pages of dataType the patient has:
// min + Hash("{patientID}:{dataType}") mod (max-min+1), with assessments 2–4,
// conditions 1–3, medications 2–3 and vital_signs always 1. It returns 0 for
// an unknown data type.
func PageCount(patientID, dataType string) int {
	lo, hi, ok := pageRange(dataType)
	if !ok {
		return 0
	}
	return int(lo + mod(Hash(patientID+":"+dataType), hi-lo+1))
}

// MDSCount returns how many MDS assessment ids the assessments record on the
// given page carries: 5 + Hash("{patientID}:assessments:{page}") mod 6.
func MDSCount(patientID string, page int) int {
	return int(5 + mod(Hash(patientID+":"+TypeAssessments+":"+strconv.Itoa(page)), 6))
}

// record is the single item of a page.
type record struct {
	ID               string   `json:"id"`
	PatientID        string   `json:"patientId"`
	DataType         string   `json:"dataType"`
	Value            int64    `json:"value"`
	MDSAssessmentIDs []string `json:"mdsAssessmentIds,omitempty"`
	MDSCount         int64    `json:"mdsCount,omitempty"`
}

type paging struct {
	HasMore  bool `json:"hasMore"`
	Page     int  `json:"page"`
	PageSize int  `json:"pageSize"`
	Total    int  `json:"total"`
}

type pageBody struct {
	Data   []record `json:"data"`
	Paging paging   `json:"paging"`
}

// pageOf builds page (1 ≤ page ≤ total) of dataType for the patient.
func pageOf(patientID, dataType string, page, total int) pageBody {
	s := Hash(fmt.Sprintf("%s:%s:%d", patientID, dataType, page))
	r := record{
		ID:        fmt.Sprintf("%s-%s-p%d-i0", strings.ToUpper(dataType[:4]), patientID, page),
		PatientID: patientID,
		DataType:  dataType,
		Value:     mod(s, 100),
	}
	if dataType == TypeAssessments {
		c := 5 + mod(s, 6)
		r.MDSCount = c
		r.MDSAssessmentIDs = make([]string, c)
		for n := range c {
			r.MDSAssessmentIDs[n] = fmt.Sprintf("MDS-%s-p%d-0-%02d", patientID, page, n+1)
		}
	}
	return pageBody{
		Data:   []record{r},
		Paging: paging{HasMore: page < total, Page: page, PageSize: 1, Total: total},
	}
}

type demographics struct {
	PatientID string `json:"patientId"`
	FirstName string `json:"firstName"`
	LastName  string `json:"lastName"`
	DOB       string `json:"dob"`
	Gender    string `json:"gender"`
	Status    string `json:"status"`
}

func demographicsOf(patientID string) demographics {
	s := Hash(patientID + ":demographics")
	gender := "F"
	if s.Bit(0) == 0 {
		gender = "M"
	}
	return demographics{
		PatientID: patientID,
		FirstName: fmt.Sprintf("First%d", mod(s, 1000)),
		LastName:  fmt.Sprintf("Last%d", mod(new(big.Int).Rsh(s, 8), 1000)),
		DOB: fmt.Sprintf("19%d-%02d-%02d",
			50+mod(s, 50), 1+mod(s, 12), 1+mod(new(big.Int).Rsh(s, 4), 28)),
		Gender: gender,
		Status: "active",
	}
}

type mdsResponse struct {
	ResponseValue string `json:"responseValue"`
}

type mdsQuestion struct {
	Key       string        `json:"key"`
	Responses []mdsResponse `json:"responses"`
}

type mdsSection struct {
	SectionID string        `json:"sectionId"`
	Questions []mdsQuestion `json:"questions"`
}

type mdsPayload struct {
	AssessmentID string       `json:"assessmentId"`
	Status       string       `json:"status"`
	Sections     []mdsSection `json:"sections"`
}

type mdsRow struct {
	AssessmentID string     `json:"assessment_id"`
	Payload      mdsPayload `json:"payload"`
}

type mdsBody struct {
	RowCount int      `json:"rowCount"`
	Rows     []mdsRow `json:"rows"`
}

func mdsDetailsOf(assessmentID string) mdsBody {
	s := Hash(assessmentID)
	p := mdsPayload{AssessmentID: assessmentID, Status: "completed"}
	for i := int64(1); i <= 3; i++ {
		sec := mdsSection{SectionID: fmt.Sprintf("S%d", i)}
		for j := int64(1); j <= 3; j++ {
			v := new(big.Int).Add(s, big.NewInt(10*i+j))
			sec.Questions = append(sec.Questions, mdsQuestion{
				Key:       fmt.Sprintf("B%d0%d", i, j),
				Responses: []mdsResponse{{ResponseValue: strconv.FormatInt(mod(v, 5), 10)}},
			})
		}
		p.Sections = append(p.Sections, sec)
	}
	return mdsBody{RowCount: 1, Rows: []mdsRow{{AssessmentID: assessmentID, Payload: p}}}
}
