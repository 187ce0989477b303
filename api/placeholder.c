/* Keeps the api library non-empty until its first source lands. */
typedef int ql_api_placeholder_t;
