/* Keeps the test helper library non-empty. */
typedef int ql_test_common_unused;
