package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// dowNames are the day names robfig/cron reads in the day-of-week field.
var dowNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// sundaySeven rewrites a day-of-week field for robfig/cron, which knows the
// days 0–6 only, where crontab(5) (cronie, Vixie cron) reads 0–7, 0 and 7
// both Sunday: 7 alone, a range ending in 7 (5-7, 1-7/2, 7-7), and, as
// cronie does, a range from a later day to Sunday by 0 or name without a
// step (fri-sun, 5-0). Everything else is left for robfig/cron to judge.
func sundaySeven(field string) (string, error) {
	var out []string
	for _, e := range strings.Split(field, ",") {
		rewritten, err := sundaySevenRange(e)
		if err != nil {
			return "", err
		}
		out = append(out, rewritten...)
	}
	return strings.Join(out, ","), nil
}

func sundaySevenRange(e string) ([]string, error) {
	rng, stepText, hasStep := strings.Cut(e, "/")
	lo, hi, isRange := strings.Cut(rng, "-")
	if dowValue(lo) > 7 || isRange && dowValue(hi) > 7 {
		// robfig/cron would say "above maximum (6)", which 7 is not.
		return nil, fmt.Errorf("the day of week %s is out of range: want 0-7 (0 and 7 are Sunday) or sun-sat", e)
	}
	if !isRange {
		if !hasStep && dowValue(lo) == 7 {
			return []string{"0"}, nil
		}
		return []string{e}, nil
	}
	from, to := dowValue(lo), dowValue(hi)
	switch {
	case from < 0 || from > 7 || strings.Contains(hi, "-") || strings.Contains(stepText, "/"):
		return []string{e}, nil // robfig/cron says what is wrong
	case to == 0 && from > 0 && !hasStep:
		// cronie reads a range from a later day to Sunday (fri-sun) as
		// ending at 7.
		return []string{lo + "-6", "0"}, nil
	case to != 7:
		return []string{e}, nil
	}
	step := 1
	if hasStep {
		var err error
		if step, err = strconv.Atoi(stepText); err != nil || step <= 0 {
			return nil, fmt.Errorf("the day-of-week range %s needs a positive whole step after /", e)
		}
	}
	var out []string
	if from <= 6 {
		r := lo + "-6"
		if hasStep {
			r += "/" + stepText
		}
		out = append(out, r)
	}
	if (7-from)%step == 0 {
		out = append(out, "0") // the range reaches 7, Sunday
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the day-of-week range %s holds no day", e)
	}
	return out, nil
}

// dowValue is the day a day-of-week value names as robfig/cron reads it, or
// -1 when it names none.
func dowValue(v string) int {
	if d, ok := dowNames[strings.ToLower(v)]; ok {
		return d
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
