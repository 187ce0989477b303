/*
 * The API's status for each error code is the default of its row in base/ql_error_codes.def,
 * and the codes outside the table keep their own (docs/errors.md).
 */
#include "api/api_int.h"

#include <criterion/criterion.h>

Test(error_status, every_code_answers_its_table_status) {
    size_t n;
    const ql_error_info_t *t = ql_error_table(&n);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ql_api_http_status(t[i].code), t[i].http_status, "%s (%s)", t[i].name,
                     t[i].client_code);
}

Test(error_status, codes_outside_the_table) {
    cr_assert_eq(ql_api_http_status(0), 200);
    cr_assert_eq(ql_api_http_status(UV_ENOSPC), 507);
    cr_assert_eq(ql_api_http_status(UV_ENOMEM), 500);
    cr_assert_eq(ql_api_http_status(UV_EIO), 500);
    cr_assert_eq(ql_api_http_status(QL_ERR_LAST), 500);
}
