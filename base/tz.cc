// The one C++ file: CCTZ behind the C API of base/ql_time.h.
//
// No exception may cross into C: every entry point that allocates catches everything and
// returns UV_ENOMEM (allocation is the only thing here that throws).
#include "base/ql_time.h"

#include "base/ql_error.h"

#include <cctz/civil_time.h>
#include <cctz/time_zone.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <sys/stat.h>
#include <unordered_map>
#include <uv.h>

struct ql_tz {
    cctz::time_zone zone;
    std::string name;
};

struct ql_tzcache {
    std::unordered_map<std::string, std::unique_ptr<ql_tz>> zones;
};

namespace {

const cctz::civil_second kEpoch(1970, 1, 1, 0, 0, 0);

// Splits epoch ms into whole seconds and a 0..999 remainder, rounding toward -infinity so that
// -1 ms is second -1, ms 999 (C++ '/' truncates toward zero).
void split_ms(int64_t ms, int64_t *sec, int *rem) {
    int64_t s = ms / 1000;
    int64_t r = ms % 1000;
    if (r < 0) {
        r += 1000;
        s -= 1;
    }
    *sec = s;
    *rem = static_cast<int>(r);
}

// sec * 1000 + rem, or false on overflow (cannot happen for checked civil times; kept so a
// future widening of QL_CIVIL_YEAR_* fails loudly instead of wrapping).
bool join_ms(int64_t sec, int rem, int64_t *out) {
    int64_t ms;
    if (__builtin_mul_overflow(sec, int64_t{1000}, &ms) ||
        __builtin_add_overflow(ms, int64_t{rem}, &ms))
        return false;
    *out = ms;
    return true;
}

void from_civil_second(const cctz::civil_second &cs, int ms, ql_civil_t *out) {
    out->year = cs.year();
    out->month = cs.month();
    out->day = cs.day();
    out->hour = cs.hour();
    out->minute = cs.minute();
    out->second = cs.second();
    out->ms = ms;
}

// Callers have run ql_civil_check, so CCTZ's normalisation of out-of-range fields never kicks in.
cctz::civil_second to_civil_second(const ql_civil_t *c) {
    return cctz::civil_second(c->year, c->month, c->day, c->hour, c->minute, c->second);
}

int64_t tp_seconds(const cctz::time_point<cctz::seconds> &tp) {
    return static_cast<int64_t>(tp.time_since_epoch().count());
}

// Accepts what looks like an IANA zone id and nothing that could name a file outside the tz
// database: CCTZ appends the name to TZDIR, and "/etc/passwd", "../x" or "file:x" would be read.
bool valid_zone_name(const char *name) {
    size_t n = std::strlen(name);
    if (n == 0 || n > 255)
        return false;
    if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z')))
        return false;
    size_t comp_start = 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = name[i];
        if (ch == '/' || ch == '\0') {
            size_t len = i - comp_start;
            if (len == 0 || name[comp_start] == '.')
                return false; // empty, ".", ".." or hidden component
            comp_start = i + 1;
            continue;
        }
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '+' || ch == '.';
        if (!ok)
            return false;
    }
    // "localtime" is a symlink to the host's /etc/localtime: a name whose rules differ per host.
    // "right/" zones count leap seconds in their time scale, which epoch ms does not.
    if (std::strcmp(name, "localtime") == 0 || std::strncmp(name, "right/", 6) == 0)
        return false;
    return true;
}

// CCTZ caches every name it is asked for, failures included, for the life of the process; a
// name whose file does not exist is rejected here so that it never reaches that cache.
bool zone_file_exists(const char *name) {
    // The same directory CCTZ's default zone-info source reads.
    const char *dir = std::getenv("TZDIR");
    if (dir == nullptr || *dir == '\0')
        dir = "/usr/share/zoneinfo";
    std::string path(dir);
    path += '/';
    path += name;
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

extern "C" {

int ql_civil_add_days(const ql_civil_t *in, int64_t days, ql_civil_t *out) {
    if (ql_civil_check(in) != 0)
        return QL_EINVAL;
    // Bounds days before CCTZ adds them: its civil arithmetic does not check for overflow.
    const int64_t max_days = (QL_CIVIL_YEAR_MAX - QL_CIVIL_YEAR_MIN + 1) * 366;
    if (days > max_days || days < -max_days)
        return QL_EINVAL;
    cctz::civil_day d(in->year, in->month, in->day);
    d += days;
    if (d.year() < QL_CIVIL_YEAR_MIN || d.year() > QL_CIVIL_YEAR_MAX)
        return QL_EINVAL;
    ql_civil_t r = *in;
    r.year = d.year();
    r.month = d.month();
    r.day = d.day();
    *out = r;
    return 0;
}

void ql_civil_from_utc_ms(int64_t epoch_ms, ql_civil_t *out) {
    int64_t sec;
    int rem;
    split_ms(epoch_ms, &sec, &rem);
    from_civil_second(kEpoch + sec, rem, out);
}

int ql_civil_to_utc_ms(const ql_civil_t *c, int64_t *out_ms) {
    if (ql_civil_check(c) != 0)
        return QL_EINVAL;
    int64_t sec = static_cast<int64_t>(to_civil_second(c) - kEpoch);
    return join_ms(sec, c->ms, out_ms) ? 0 : QL_EINVAL;
}

int ql_tz_load(const char *iana_name, ql_tz_t **out) {
    if (iana_name == nullptr || out == nullptr)
        return QL_EINVAL;
    try {
        std::unique_ptr<ql_tz> tz(new ql_tz);
        if (std::strcmp(iana_name, "UTC") == 0) {
            tz->zone = cctz::utc_time_zone();
        } else {
            if (!valid_zone_name(iana_name) || !zone_file_exists(iana_name))
                return QL_EINVAL;
            // On failure CCTZ sets the zone to UTC and returns false: a typo must not become UTC.
            if (!cctz::load_time_zone(iana_name, &tz->zone))
                return QL_EINVAL;
        }
        tz->name = iana_name;
        *out = tz.release();
        return 0;
    } catch (...) {
        return UV_ENOMEM;
    }
}

void ql_tz_free(ql_tz_t *tz) {
    delete tz;
}

const char *ql_tz_name(const ql_tz_t *tz) {
    return tz->name.c_str();
}

void ql_tz_to_civil(const ql_tz_t *tz, int64_t epoch_ms, ql_civil_t *out) {
    int64_t sec;
    int rem;
    split_ms(epoch_ms, &sec, &rem);
    cctz::time_point<cctz::seconds> tp{cctz::seconds(sec)};
    from_civil_second(cctz::convert(tp, tz->zone), rem, out);
}

int ql_tz_offset_sec(const ql_tz_t *tz, int64_t epoch_ms) {
    int64_t sec;
    int rem;
    split_ms(epoch_ms, &sec, &rem);
    cctz::time_point<cctz::seconds> tp{cctz::seconds(sec)};
    return tz->zone.lookup(tp).offset;
}

int ql_tz_lookup(const ql_tz_t *tz, const ql_civil_t *wall, ql_tz_kind_t *kind, int64_t *pre_ms,
                 int64_t *post_ms) {
    if (tz == nullptr || ql_civil_check(wall) != 0)
        return QL_EINVAL;
    const cctz::time_zone::civil_lookup cl = tz->zone.lookup(to_civil_second(wall));
    int64_t pre, post;
    if (!join_ms(tp_seconds(cl.pre), wall->ms, &pre) ||
        !join_ms(tp_seconds(cl.post), wall->ms, &post))
        return QL_EINVAL;
    if (kind) {
        switch (cl.kind) {
        case cctz::time_zone::civil_lookup::UNIQUE:
            *kind = QL_TZ_UNIQUE;
            break;
        case cctz::time_zone::civil_lookup::SKIPPED:
            *kind = QL_TZ_SKIPPED;
            break;
        case cctz::time_zone::civil_lookup::REPEATED:
            *kind = QL_TZ_REPEATED;
            break;
        }
    }
    if (pre_ms)
        *pre_ms = pre;
    if (post_ms)
        *post_ms = post;
    return 0;
}

int ql_tz_from_civil(const ql_tz_t *tz, const ql_civil_t *wall, int64_t *out_ms) {
    // java.time's atZone: SKIPPED -> later by the gap, REPEATED -> the earlier offset. CCTZ's
    // pre instant (computed with the offset before the transition) is both.
    return ql_tz_lookup(tz, wall, nullptr, out_ms, nullptr);
}

int ql_tzcache_new(ql_tzcache_t **out) {
    try {
        *out = new ql_tzcache;
        return 0;
    } catch (...) {
        return UV_ENOMEM;
    }
}

void ql_tzcache_free(ql_tzcache_t *cache) {
    delete cache;
}

int ql_tzcache_get(ql_tzcache_t *cache, const char *iana_name, const ql_tz_t **out) {
    if (cache == nullptr || iana_name == nullptr || out == nullptr)
        return QL_EINVAL;
    try {
        auto it = cache->zones.find(iana_name);
        if (it != cache->zones.end()) {
            *out = it->second.get();
            return 0;
        }
        ql_tz_t *tz = nullptr;
        int rc = ql_tz_load(iana_name, &tz);
        if (rc != 0)
            return rc;
        std::unique_ptr<ql_tz> owned(tz);
        auto ins = cache->zones.emplace(iana_name, std::move(owned));
        *out = ins.first->second.get();
        return 0;
    } catch (...) {
        return UV_ENOMEM;
    }
}

} // extern "C"
