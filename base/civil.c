/* Civil-time helpers that need no zone rules: range checks and comparison. */
#include "base/ql_error.h"
#include "base/ql_time.h"

#include <stddef.h>

static bool is_leap(int64_t year) {
    /* C's % truncates toward zero, which is still right for these divisibility tests. */
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

int ql_civil_days_in_month(int64_t year, int month) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month < 1 || month > 12)
        return 0;
    if (month == 2 && is_leap(year))
        return 29;
    return days[month - 1];
}

int ql_civil_check(const ql_civil_t *c) {
    if (c == NULL)
        return QL_EINVAL;
    if (c->year < QL_CIVIL_YEAR_MIN || c->year > QL_CIVIL_YEAR_MAX)
        return QL_EINVAL;
    if (c->month < 1 || c->month > 12)
        return QL_EINVAL;
    if (c->day < 1 || c->day > ql_civil_days_in_month(c->year, c->month))
        return QL_EINVAL;
    if (c->hour < 0 || c->hour > 23 || c->minute < 0 || c->minute > 59 || c->second < 0 ||
        c->second > 59 || c->ms < 0 || c->ms > 999)
        return QL_EINVAL;
    return 0;
}

static int cmp64(int64_t a, int64_t b) {
    return (a > b) - (a < b);
}

int ql_civil_cmp(const ql_civil_t *a, const ql_civil_t *b) {
    int r = cmp64(a->year, b->year);
    if (r == 0)
        r = cmp64(a->month, b->month);
    if (r == 0)
        r = cmp64(a->day, b->day);
    if (r == 0)
        r = cmp64(a->hour, b->hour);
    if (r == 0)
        r = cmp64(a->minute, b->minute);
    if (r == 0)
        r = cmp64(a->second, b->second);
    if (r == 0)
        r = cmp64(a->ms, b->ms);
    return r;
}
