//! The live view: the terminal in raw mode on its alternate screen, restored on every way out
//! (`q`, Esc, Ctrl-C, SIGTERM, SIGINT, SIGHUP, an error, a panic).

use std::io::Stdout;
use std::time::Instant;

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{execute, terminal};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Terminal;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use super::table::{SortBy, COLUMNS};
use super::{Collector, TopArgs};
use crate::failure::{self, Failure};

/// Raw mode and the alternate screen while alive.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let mut out = std::io::stdout();
        if let Err(err) = execute!(out, terminal::EnterAlternateScreen) {
            restore();
            return Err(err);
        }
        // A panic restores the terminal before its message is printed.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        let terminal = Terminal::new(CrosstermBackend::new(out)).inspect_err(|_| restore())?;
        Ok(Screen { terminal })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
        let _ = self.terminal.show_cursor();
    }
}

fn restore() {
    let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen);
    let _ = terminal::disable_raw_mode();
}

enum Step {
    Refresh,
    Key(Event),
    Quit,
}

/// Runs the live view until `q`, Esc, Ctrl-C or a signal.
pub fn run(
    collector: &mut Collector,
    args: &TopArgs,
    runtime: &tokio::runtime::Runtime,
) -> Result<u8, Failure> {
    let io = |e: std::io::Error| Failure::new(failure::FAILURE, format!("terminal: {e}"));
    let mut screen = Screen::enter().map_err(io)?;
    let (keys, mut key_events) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(event) = event::read() {
            if keys.send(event).is_err() {
                break;
            }
        }
    });
    let mut signals = runtime
        .block_on(async {
            Ok::<_, std::io::Error>([
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
                signal(SignalKind::hangup())?,
            ])
        })
        .map_err(io)?;
    let mut sort = args.sort;
    let mut error: Option<String> = None;
    let mut next_refresh = Instant::now();
    loop {
        if Instant::now() >= next_refresh {
            error = runtime
                .block_on(collector.refresh())
                .err()
                .map(|f| f.message);
            next_refresh = Instant::now() + args.interval;
        }
        (screen.terminal)
            .draw(|frame| draw(frame, collector, sort, error.as_deref()))
            .map_err(io)?;
        let step = runtime.block_on(async {
            let [term, int, hup] = &mut signals;
            tokio::select! {
                event = key_events.recv() => event.map_or(Step::Quit, Step::Key),
                _ = tokio::time::sleep_until(next_refresh.into()) => Step::Refresh,
                _ = term.recv() => Step::Quit,
                _ = int.recv() => Step::Quit,
                _ = hup.recv() => Step::Quit,
            }
        });
        match step {
            Step::Quit => break,
            Step::Refresh => {}
            Step::Key(Event::Key(key)) if key.kind == KeyEventKind::Press => match key.code {
                KeyCode::Char('q') | KeyCode::Esc => break,
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => break,
                KeyCode::Char('l') => sort = SortBy::Lease,
                KeyCode::Char('w') => sort = SortBy::Waiters,
                KeyCode::Char('n') => sort = SortBy::Name,
                _ => {}
            },
            Step::Key(_) => {}
        }
    }
    drop(screen);
    Ok(0)
}

fn draw(frame: &mut ratatui::Frame, collector: &Collector, sort: SortBy, error: Option<&str>) {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(collector.header(sort).line()), head);
    let rows = collector.rows(sort);
    let widths = [
        Constraint::Fill(2),
        Constraint::Length(10),
        Constraint::Fill(3),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(21),
    ];
    let table = Table::new(rows.iter().map(|r| Row::new(r.cells())), widths)
        .header(Row::new(COLUMNS).style(Style::new().add_modifier(Modifier::BOLD)));
    frame.render_widget(table, body);
    let help = match error {
        Some(err) => format!("error: {err} (retrying)"),
        None => "q quit | sort: l lease, w waiters, n name".to_string(),
    };
    frame.render_widget(Paragraph::new(help), foot);
}
