module github.com/dubflow/dubflow/services/migrate

go 1.26.0
