package blob

// PresignGetAt is PresignGet as of at, for the tests.
var PresignGetAt = (*Presigner).presignGetAt
