//! `crawlward top`: a terminal screen for the person on call. It polls one
//! or more nodes' status endpoints every interval and shows, all nodes
//! together: the crawlers' share of upstream time, refusals by layer,
//! verified search crawlers given 429 or 5xx (first, and marked), the
//! budgets and the browse cap, the ladder's rungs, and requests and
//! statuses per agent and verdict with their rate. Keys: `s` sort, `/`
//! filter, `p` pause, `?` help, `q` quit. A node that does not answer is
//! named, and the others are shown.

mod view;

use crate::exit;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use std::time::{Duration, Instant};
use view::{row_line, Poll, Row, Sort, View, HEADER};

pub struct TopOptions {
    pub urls: Vec<String>,
    pub interval: Duration,
    /// Print one screen of text and exit (no terminal needed).
    pub once: bool,
}

/// The status endpoints' answers, polled at once (each within the interval).
fn poll(agent: &ureq::Agent, urls: &[String]) -> Vec<Poll> {
    std::thread::scope(|s| {
        let handles: Vec<_> = urls
            .iter()
            .map(|url| {
                s.spawn(move || {
                    let answer = agent
                        .get(url)
                        .call()
                        .map_err(|e| e.to_string())
                        .and_then(|mut r| r.body_mut().with_config().limit(16 << 20).read_to_vec().map_err(|e| e.to_string()))
                        .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("not the status JSON: {e}")));
                    Poll { url: url.clone(), answer }
                })
            })
            .collect();
        handles.into_iter().zip(urls).map(|(h, url)| h.join().unwrap_or_else(|_| Poll { url: url.clone(), answer: Err("poll failed".into()) })).collect()
    })
}

/// What the keys changed.
struct Keys {
    sort: Sort,
    filter: String,
    /// Typing a filter: the text so far.
    typing: Option<String>,
    paused: bool,
    help: bool,
}

/// The screen's lines for a `width` x `height` terminal.
fn lines(v: &View, keys: &Keys, width: usize, height: usize) -> Vec<(String, Style)> {
    let mut out: Vec<(String, Style)> = Vec::new();
    let state = format!(
        "crawlward top: sort {}{}{}",
        keys.sort.as_str(),
        if keys.filter.is_empty() { String::new() } else { format!(", filter \"{}\"", keys.filter) },
        if keys.paused { ", PAUSED" } else { "" }
    );
    out.push((view::cut(&state, width), Style::default().add_modifier(Modifier::BOLD)));
    for l in v.summary(width) {
        let style = if l.starts_with("VERIFIED SEARCH") || l.contains("NO END") {
            Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            Style::default()
        };
        out.push((l, style));
    }
    if keys.help {
        for l in [
            "s      sort by rate, requests, refused, agent",
            "/      filter rows by agent, purpose or verdict (Enter applies, Esc clears)",
            "p      pause (the screen keeps what it shows)",
            "?      this help",
            "q      quit",
            "Rows marked ! are verified search crawlers that got 429 or 5xx.",
        ] {
            out.push((view::cut(l, width), Style::default()));
        }
    }
    out.push((view::cut(HEADER, width), Style::default().add_modifier(Modifier::REVERSED)));
    let footer = match &keys.typing {
        Some(t) => format!("filter: {t}_"),
        None => "q quit  s sort  / filter  p pause  ? help".to_string(),
    };
    let room = height.saturating_sub(out.len() + 1);
    let shown = v.shown(keys.sort, &keys.filter);
    for r in shown.iter().take(room) {
        let style = if r.slowed_search() { Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED) } else { Style::default() };
        out.push((row_line(r, width), style));
    }
    if shown.len() > room {
        // the last row says how many more there are
        if let Some(last) = out.last_mut() {
            *last = (view::cut(&format!("  ... and {} more rows", shown.len() - room + 1), width), Style::default());
        }
    }
    while out.len() + 1 < height {
        out.push((String::new(), Style::default()));
    }
    out.push((view::cut(&footer, width), Style::default().add_modifier(Modifier::REVERSED)));
    out
}

pub fn top(opts: &TopOptions) -> i32 {
    let timeout = opts.interval.min(Duration::from_secs(5)).max(Duration::from_millis(200));
    let agent = ureq::Agent::config_builder().timeout_global(Some(timeout)).http_status_as_error(true).build().new_agent();
    let mut keys = Keys { sort: Sort::Rate, filter: String::new(), typing: None, paused: false, help: false };
    if opts.once {
        let v = View::build(&poll(&agent, &opts.urls), &[], 0.0);
        for (l, _) in lines(&v, &keys, 200, 24 + v.rows.len()) {
            say!("{}", l.trim_end());
        }
        return if v.down.len() == opts.urls.len() { exit::IO } else { exit::OK };
    }
    let mut terminal = ratatui::init();
    let mut previous: Vec<Row> = Vec::new();
    let mut last = Instant::now();
    let mut v = View::build(&poll(&agent, &opts.urls), &previous, 0.0);
    previous.clone_from(&v.rows);
    let code = loop {
        let drawn = terminal.draw(|f| {
            let area = f.area();
            let text: Vec<Line> = lines(&v, &keys, area.width as usize, area.height as usize).into_iter().map(|(l, s)| Line::styled(l, s)).collect();
            f.render_widget(Paragraph::new(text), Rect { x: 0, y: 0, width: area.width, height: area.height });
        });
        if let Err(e) = drawn {
            ratatui::restore();
            return exit::io_error("cannot draw the screen", e);
        }
        let wait = opts.interval.saturating_sub(last.elapsed());
        match event::poll(wait) {
            Ok(true) => {
                if let Ok(Event::Key(k)) = event::read() {
                    if k.kind != KeyEventKind::Press {
                        continue;
                    }
                    if let Some(t) = keys.typing.as_mut() {
                        match k.code {
                            KeyCode::Enter => keys.filter = keys.typing.take().unwrap_or_default(),
                            KeyCode::Esc => {
                                keys.typing = None;
                                keys.filter.clear();
                            }
                            KeyCode::Backspace => {
                                t.pop();
                            }
                            KeyCode::Char(c) if !c.is_control() && t.chars().count() < 40 => t.push(c),
                            _ => {}
                        }
                        continue;
                    }
                    match k.code {
                        KeyCode::Char('q') | KeyCode::Esc => break exit::OK,
                        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => break exit::OK,
                        KeyCode::Char('s') => keys.sort = keys.sort.next(),
                        KeyCode::Char('p') => keys.paused = !keys.paused,
                        KeyCode::Char('?') | KeyCode::Char('h') => keys.help = !keys.help,
                        KeyCode::Char('/') => keys.typing = Some(keys.filter.clone()),
                        _ => {}
                    }
                }
            }
            Ok(false) => {
                if !keys.paused {
                    let elapsed = last.elapsed().as_secs_f64();
                    last = Instant::now();
                    v = View::build(&poll(&agent, &opts.urls), &previous, elapsed);
                    previous.clone_from(&v.rows);
                } else {
                    last = Instant::now();
                }
            }
            Err(e) => {
                ratatui::restore();
                return exit::io_error("cannot read the keyboard", e);
            }
        }
    };
    ratatui::restore();
    code
}
